"""The defaults of ``tbconvert publish``'s levels of detail, importing nothing, for the CLI's
help: the coarsest level's buckets over a line's step range, how many levels at most, and how
much finer each is than the one before."""

DEFAULT_BUCKETS = 128
DEFAULT_LEVELS = 2
FACTOR = 8
