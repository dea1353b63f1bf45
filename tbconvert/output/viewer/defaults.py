"""The defaults of ``tbconvert publish``'s levels of detail, importing nothing, for the CLI's
help: the coarsest level's buckets over a line's step range, how many levels at most, how
much finer each is than the one before, and the bundle's size a finer level may not push it
past (plotly.js alone is about 4.6 MB)."""

DEFAULT_BUCKETS = 64
DEFAULT_LEVELS = 4
FACTOR = 8
DEFAULT_MAX_BYTES = 10_000_000
