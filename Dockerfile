# measuredb application image. One image, two roles: docker-compose.yml runs it as
# `measuredb collector` and as `measuredb api`.
#
# Base pinned to an exact Python patch release on Debian 12 (bookworm), the same Debian as
# the development machines. Bump the tag deliberately (and rebuild), never float it.
FROM python:3.11.17-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MEASUREDB_DATA_DIR=/var/lib/measuredb \
    NUMBA_CACHE_DIR=/var/lib/measuredb/numba-cache

# Unprivileged runtime user, fixed uid/gid so volume ownership is predictable.
# The spool folder is created here, owned by that user, so a new named volume mounted on
# it starts out with the same ownership.
RUN groupadd --system --gid 10001 measuredb \
    && useradd --system --uid 10001 --gid measuredb --home-dir /home/measuredb \
        --create-home --shell /usr/sbin/nologin measuredb \
    && install -d -o measuredb -g measuredb -m 0750 /var/lib/measuredb /var/lib/measuredb/spool \
        /var/lib/measuredb/numba-cache

WORKDIR /app
# .dockerignore keeps the context to what the image needs: pyproject.toml, requirements.lock,
# cli/, api/, collector/, core/, schema/, queries/.
COPY . /app
# The exact pins of what the product needs (requirements.lock; the test and lint tools are in
# requirements-dev.lock, not in the image), then the project itself against them.
RUN pip install --no-cache-dir -r requirements.lock .
# core/schema.py and core/catalog.py find schema/ next to the core package
# (Path(__file__).parents[1] / "schema"), which holds for the source tree but not for the
# copy pip put in site-packages. Importing the packages from /app keeps schema/ where they
# look; drop this once schema/ ships as package data or its folder is a setting.
ENV PYTHONPATH=/app

USER 10001:10001
EXPOSE 8000
# compose always gives the command; run alone, the image just shows what it can do.
CMD ["measuredb", "--help"]
