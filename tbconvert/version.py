"""The version of tbconvert (read by the build, the CLI and the store's conversion log)."""

__version__ = "0.1.0"
