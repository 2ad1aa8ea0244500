"""Campaigns: YAML configs expanded into work units, run as resumable shards
(SLURM job arrays included)."""
from audee.campaign.config import Campaign, Unit, load_campaign
from audee.campaign.runner import run_shard, shard_of

__all__ = ["Campaign", "Unit", "load_campaign", "run_shard", "shard_of"]
