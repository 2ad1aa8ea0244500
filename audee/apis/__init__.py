"""API configs: what each layer API's parameters may be (valid draws and crafty invalid ones)."""
from audee.apis.config import ApiConfig, ParamConfig, load_api_config, load_api_configs

__all__ = ["ApiConfig", "ParamConfig", "load_api_config", "load_api_configs"]
