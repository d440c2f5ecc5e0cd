"""The per-user index cache as ``recall-kit cache list`` and ``cache clear`` see it: where it lives
(``default_cache_dir``, moved by ``RECALL_KIT_CACHE_DIR``) and its files, one per set of roots.

``open_recaller`` and ``open_indexed`` use the cache on their own; nothing here is needed to recall.
To remove a memory or forget what was learned for it, use ``forget_memory`` and ``forget_learning``:
they drop the caches that still hold it, as the store alone cannot.
"""

from memory_store import fixup_module_metadata
from recall_kit._cache_file import CACHE_DIR_ENV, CacheFile, clear_cache_files, default_cache_dir, list_cache_files
from recall_kit._forget import Forgotten, forget_learning, forget_memory

__all__ = [
    "CACHE_DIR_ENV", "CacheFile", "Forgotten", "clear_cache_files", "default_cache_dir", "forget_learning",
    "forget_memory", "list_cache_files",
]

fixup_module_metadata(__name__, globals(), __all__)
