"""``python -m converter``: the same CLI as the ``tbconvert`` console script."""

from converter.cli import main

if __name__ == "__main__":
    main()
