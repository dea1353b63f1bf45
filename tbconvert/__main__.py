"""``python -m tbconvert``: the same CLI as the ``tbconvert`` console script."""

from tbconvert.cli import main

if __name__ == "__main__":
    main()
