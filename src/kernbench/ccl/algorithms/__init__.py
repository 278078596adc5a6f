"""The built-in collective algorithms, one module each; ``config/ccl.yaml`` names the
module of every configured algorithm, and importing it registers the class."""
