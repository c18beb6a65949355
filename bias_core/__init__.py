"""bias_core: the library behind the gender-bias audit suite.

Layering (nothing imports upward): probes -> models -> metrics -> stats -> gates -> reports;
the pytest plugin in ``bias_core.plugin`` ties them together.
"""

__version__ = "0.1.0"
