/* version.h — the release this tree is: what `ingot --version` prints and
 * GET /version answers (as vLLM's server does). Bumped by hand at a
 * release; no build-time stamping, so a binary's version never depends on
 * when or where it was built. */
#ifndef INGOT_VERSION_H
#define INGOT_VERSION_H

#define INGOT_VERSION "0.1.0"

#endif
