"""memread's version, in a module of its own so that any part of the library can name it without importing the
package (which imports the predictor, and with it the loop)."""

__version__ = "0.1.0"
