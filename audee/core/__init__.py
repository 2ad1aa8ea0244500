"""What every module may need and nothing of audee's vocabulary: errors and exit codes, logging,
where the shipped data is, what comes from outside made safe, one YAML reader, CPU counts."""
