# Tables -> figures (PDF for the paper, PNG for the HTML report).


rule figures:
    input:
        TABLES,
    output:
        [
            report(f, caption=f"../report/{Path(f).stem}.rst", category="Figures")
            if f.endswith(".png")
            else f
            for f in FIGURES
        ],
    log:
        "results/logs/figures.log",
    benchmark:
        "results/benchmarks/figures.tsv"
    resources:
        mem_mb=1500,
        runtime=10,
    conda:
        CONDA_ENV
    script:
        "../scripts/figures.py"
