"""The package version, read by the build (hatch) and by whoever needs it."""

__version__ = "0.1.0"
