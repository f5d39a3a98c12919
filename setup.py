"""The one C extension Lanner builds: bjoern 3.2.2 with Lanner's patch, as workers.runtime._bjoern.

Everything else about the package is in pyproject.toml; workers/runtime/bjoern-3.2.2/README.md says what
the patch changes and why. The flags are those of bjoern's own setup.py (its defaults: SIGINT and Python
signal handling, a 0.1 s signal check, no statsd).
"""

from setuptools import Extension, setup

SOURCE = "workers/runtime/bjoern-3.2.2"
# Those of bjoern/ but statsd_tags.c (bjoern's setup.py leaves it out too without statsd).
FILES = (
    "_bjoernmodule.c",
    "common.c",
    "filewrapper.c",
    "portable_sendfile.c",
    "request.c",
    "server.c",
    "wsgi.c",
)

setup(
    ext_modules=[
        Extension(
            "workers.runtime._bjoern",
            sources=[f"{SOURCE}/http-parser/http_parser.c", *(f"{SOURCE}/bjoern/{name}" for name in FILES)],
            libraries=["ev"],
            include_dirs=[f"{SOURCE}/http-parser", "/usr/include/libev"],
            define_macros=[
                ("SIGNAL_CHECK_INTERVAL", "0.1"),
                ("WANT_SIGNAL_HANDLING", "yes"),
                ("WANT_SIGINT_HANDLING", "yes"),
            ],
            extra_compile_args=[
                "-std=c99",
                "-fno-strict-aliasing",
                "-fcommon",
                "-fPIC",
                "-Wall",
                "-Wextra",
                "-Wno-unused-parameter",
                "-Wno-missing-field-initializers",
                "-g",
            ],
        )
    ]
)
