"""API configs: what each layer API's parameters may be (valid draws and crafty invalid ones),
and each ``keras.ops`` function's arguments (the same schema, ``api_configs/ops/``)."""
from audee.apis.config import ApiConfig, ParamConfig, load_api_config, load_api_configs, load_op_configs

__all__ = ["ApiConfig", "ParamConfig", "load_api_config", "load_api_configs", "load_op_configs"]
