"""LaTeX generation (tables, number macros) and the PDF toolchain."""
