# One job per sweep point: a separate `kernbench job` process writes one record.


rule simulate:
    input:
        topology=lambda w: job_of(w).topology_sources,
    output:
        f"{RAW}/{{experiment}}/{{topology}}/{{workload}}/{{variant}}.json",
    params:
        kb=KB,
        topology_file=lambda w: job_of(w).topology_file,
        slice=lambda w: job_of(w).slice_json(),
        code=SIM_CODE,
        plugins=PLUGIN_ARGS,
    log:
        f"{LOG_DIR}/simulate/{{experiment}}/{{topology}}/{{workload}}/{{variant}}.log",
    benchmark:
        f"{BENCH_DIR}/simulate/{{experiment}}/{{topology}}/{{workload}}/{{variant}}.tsv"
    priority: job_priority
    resources:
        mem_mb=job_resource("mem_mb", 600),
        runtime=job_resource("runtime", 10),
    conda:
        CONDA_ENV
    shell:
        "{params.kb} job --experiment {wildcards.experiment} --topology-id {wildcards.topology}"
        " --topology-file {params.topology_file:q} --workload-id {wildcards.workload}"
        " --variant-id {wildcards.variant} --slice {params.slice:q} --out {output:q}"
        " {params.plugins} > {log:q} 2>&1"
