"""The one error a model fit raises, so callers can catch fitting problems alone."""


class ModelFitError(ValueError):
    """A fit could not produce a trustworthy model from the samples given.

    The message says what was wrong with the samples and what would fix it.
    """
