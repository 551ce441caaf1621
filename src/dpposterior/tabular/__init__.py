"""Tables of sensitive records: a declared schema with public bounds, reading CSV or Parquet, the
design matrix of a regression model, and the pipelines behind ``dpposterior fit`` and ``compare``
(:func:`fit_table`, :func:`compare_table`).

The rule: a bound or a category is public knowledge the user declares (``bounds.toml``); nothing
here reads one from the data. Numeric values outside their declared bounds are clipped to them (a
data-independent transform, stated in the report) or refused (``out_of_bounds = "error"``).
"""

from .design import Design
from .design import build_design
from .fit import arviz_names
from .fit import compare_table
from .fit import fit_table
from .read import read_table
from .schema import Column
from .schema import Schema
from .schema import load_schema
from .schema import parse_schema

__all__ = [
    "Column",
    "Design",
    "Schema",
    "arviz_names",
    "build_design",
    "compare_table",
    "fit_table",
    "load_schema",
    "parse_schema",
    "read_table",
]
