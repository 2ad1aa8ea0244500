"""Localization: change rates and the localize-fix loop (the paper's section 2.5)."""
from audee.localize.localizer import LocalizeConfig, Localizer, Report, Source
from audee.localize.rates import change_rates, cradle_flags

__all__ = ["LocalizeConfig", "Localizer", "Report", "Source", "change_rates", "cradle_flags"]
