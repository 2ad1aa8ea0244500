"""Reports: merge every unit and shard of a campaign directory into tables and plots."""
from audee.report.merge import load_campaign_dir
from audee.report.write import write_report

__all__ = ["load_campaign_dir", "write_report"]
