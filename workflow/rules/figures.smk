# Tables -> figures (PDF for the paper, PNG for the HTML report), each experiment's own.


rule figures:
    input:
        tables=TABLES,
        code=REPORT_SOURCES,
    output:
        [
            report(f, caption=figure_caption(f), category="Figures")
            if f.endswith(".png")
            else f
            for f in FIGURES
        ],
    params:
        plugins=PLUGINS,
        out_dir=lambda w, output: str(Path(output[0]).parent),
    log:
        f"{LOG_DIR}/figures.log",
    benchmark:
        f"{BENCH_DIR}/figures.tsv"
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        CONDA_ENV
    script:
        "../scripts/figures.py"
