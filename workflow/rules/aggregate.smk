# Records -> one tidy CSV per experiment.


rule aggregate:
    input:
        lambda w: SWEEP.outputs(w.experiment),
    output:
        report(
            "results/tables/{experiment}.csv",
            caption="../report/table.rst",
            category="Tables",
        ),
    log:
        "results/logs/aggregate/{experiment}.log",
    benchmark:
        "results/benchmarks/aggregate/{experiment}.tsv"
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        CONDA_ENV
    script:
        "../scripts/aggregate.py"
