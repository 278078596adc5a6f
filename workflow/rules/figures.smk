# Tables -> figures (PDF for the paper, PNG for the HTML report).


rule figures:
    input:
        TABLES,
    output:
        FIGURES,
    log:
        "results/logs/figures.log",
    benchmark:
        "results/benchmarks/figures.tsv"
    resources:
        mem_mb=1500,
        runtime=10,
    script:
        "../scripts/figures.py"
