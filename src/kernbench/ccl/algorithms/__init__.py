"""The built-in collective algorithms, one module each; ``kernbench/ccl/ccl.yaml`` names the
module of every configured algorithm, and importing it registers the class."""
