# Records -> one tidy CSV per experiment.


rule aggregate:
    input:
        lambda w: SWEEP.outputs(w.experiment),
    output:
        "results/tables/{experiment}.csv",
    log:
        "results/logs/aggregate/{experiment}.log",
    benchmark:
        "results/benchmarks/aggregate/{experiment}.tsv"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/aggregate.py"
