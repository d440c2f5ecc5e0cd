"""Every setting of recall-kit, declared once and loaded once: what the CLI, its daemon and its MCP
server run with, and the trust records of project files.

An agent author needs none of this (``open_recaller`` takes plain values); it serves tools that
want recall-kit's own settings the way the `recall-kit` command resolves them::

    from recall_kit import open_recaller
    from recall_kit.settings import load_settings

    settings = load_settings().required("roots", "learn")  # ConfigError in one line otherwise
    recaller = open_recaller(settings.roots.value, learn=settings.learn.value, selector=settings.selector)

Each setting is a ``Declaration`` in ``DECLARATIONS`` (name, table, environment variable, check and
bound, default, whether an untrusted project file may set it). Highest precedence first: an
argument, its ``RECALL_KIT_*`` variable, the user's own file, its ``OPENAI_*`` variable, the project
file ``./recall-kit.toml``. An untrusted project file may set only ``UNTRUSTED_FILE_MAY_SET``;
``trust_config_file`` records one, as it is now, in the user's file.
"""

from memory_store import fixup_module_metadata
from recall_kit._config_files import (
    CONFIG_FILE_NAME,
    USER_CONFIG_ENV,
    ConfigFile,
    SettingsFiles,
    TrustState,
    project_file_path,
    read_settings_files,
    trust_config_file,
    untrust_config_file,
    user_config_path,
)
from recall_kit._settings import (
    CACHE_DIR_ENV,
    DECLARATIONS,
    DEFAULT_IDLE_TIMEOUT_S,
    IDLE_TIMEOUT_ENV,
    LEARN_ENV,
    ROOTS_ENV,
    TRAIL_ENV,
    TRAIL_PROMPTS_ENV,
    UNTRUSTED_FILE_MAY_SET,
    Declaration,
    Setting,
    Settings,
    environment_setting,
    load_settings,
    unknown_keys,
)

__all__ = [
    "CACHE_DIR_ENV",
    "CONFIG_FILE_NAME",
    "ConfigFile",
    "DECLARATIONS",
    "DEFAULT_IDLE_TIMEOUT_S",
    "Declaration",
    "IDLE_TIMEOUT_ENV",
    "LEARN_ENV",
    "ROOTS_ENV",
    "Setting",
    "Settings",
    "TRAIL_ENV",
    "TRAIL_PROMPTS_ENV",
    "SettingsFiles",
    "TrustState",
    "UNTRUSTED_FILE_MAY_SET",
    "USER_CONFIG_ENV",
    "environment_setting",
    "load_settings",
    "project_file_path",
    "read_settings_files",
    "trust_config_file",
    "unknown_keys",
    "untrust_config_file",
    "user_config_path",
]

fixup_module_metadata(__name__, globals(), __all__)
