"""The package's version, in a module of its own that imports nothing: the
modules that record it (a preset's metadata) read it without importing the
package root, and packaging tools can read it without importing anything."""

__version__ = "0.1.0"
