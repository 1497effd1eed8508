/* amx_emu.h — the AMX tile instructions that src/quant_gemm_r16_amx.c
 * uses, in plain C from their specification (Intel SDM: LDTILECFG,
 * TILELOADD, TILESTORED, TILEZERO, TDPBSUD, TILERELEASE), so that the AMX
 * kernels are tested on CPUs without AMX: no host this project has run on
 * exposes it.
 *
 * Include after <immintrin.h> (its intrinsics are replaced here: the
 * function-like ones by macros over the emulation, the macros undefined
 * first), then the kernel file. One set of 8 tile registers for the
 * process (the tests are single-threaded).
 *
 * Besides computing, it faults (amx_emu_faults counts, the first few are
 * printed) where the hardware raises #GP or #UD: a configuration with a
 * palette other than 0 or 1, a nonzero reserved byte, a tile of more than
 * 16 rows or 64 bytes a row, or rows without bytes or bytes without rows;
 * a tile instruction before a configuration or on an unconfigured tile;
 * a product whose shapes do not chain (A's bytes per row / 4 = B's rows,
 * C's rows = A's rows, C's bytes per row = B's) or that names one
 * register twice. So a kernel whose configuration and products would not
 * run on AMX fails its test here too. */
#ifndef INGOT_AMX_EMU_H
#define INGOT_AMX_EMU_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define AMX_EMU_TILES 8

static struct {
	int configured;
	uint16_t colsb[AMX_EMU_TILES];
	uint8_t rows[AMX_EMU_TILES];
	uint8_t data[AMX_EMU_TILES][16][64];
} amx_emu;
static int amx_emu_faults;
static int amx_emu_quiet; /* a test provoking a fault on purpose */

static void amx_emu_fault(const char *what, int t)
{
	if (amx_emu_faults++ < 5 && !amx_emu_quiet)
		fprintf(stderr, "amx_emu: fault: %s (tile %d)\n", what, t);
}

/* Whether tile t may be used now. */
static int amx_emu_ready(int t)
{
	if (!amx_emu.configured) {
		amx_emu_fault("tile instruction before LDTILECFG", t);
		return 0;
	}
	if (t < 0 || t >= AMX_EMU_TILES || amx_emu.rows[t] == 0) {
		amx_emu_fault("tile not configured", t);
		return 0;
	}
	return 1;
}

static void amx_emu_loadconfig(const void *cfg)
{
	const uint8_t *c = cfg;
	memset(&amx_emu, 0, sizeof amx_emu);
	if (c[0] == 0)
		return; /* palette 0: the init state, tiles unconfigured */
	int bad = c[0] != 1 || c[1] != 0;
	for (int i = 2; i < 16; i++)
		bad |= c[i] != 0;
	for (int i = 32; i < 48; i++)
		bad |= c[i] != 0;
	for (int i = 56; i < 64; i++)
		bad |= c[i] != 0;
	for (int t = 0; t < AMX_EMU_TILES; t++) {
		uint16_t colsb;
		memcpy(&colsb, c + 16 + 2 * t, sizeof colsb);
		const uint8_t rows = c[48 + t];
		bad |= colsb > 64 || rows > 16 || (colsb == 0) != (rows == 0);
		amx_emu.colsb[t] = colsb;
		amx_emu.rows[t] = rows;
	}
	if (bad) {
		amx_emu_fault("invalid tile configuration", -1);
		memset(&amx_emu, 0, sizeof amx_emu);
		return;
	}
	amx_emu.configured = 1;
}

static void amx_emu_release(void)
{
	memset(&amx_emu, 0, sizeof amx_emu);
}

/* TILELOADD: the configured rows and bytes from base, rows stride apart;
 * the rest of the register zeroed. */
static void amx_emu_loadd(int t, const void *base, long stride)
{
	if (!amx_emu_ready(t))
		return;
	memset(amx_emu.data[t], 0, sizeof amx_emu.data[t]);
	for (int r = 0; r < amx_emu.rows[t]; r++)
		memcpy(amx_emu.data[t][r], (const uint8_t *)base + (long)r * stride, amx_emu.colsb[t]);
}

static void amx_emu_stored(int t, void *base, long stride)
{
	if (!amx_emu_ready(t))
		return;
	for (int r = 0; r < amx_emu.rows[t]; r++)
		memcpy((uint8_t *)base + (long)r * stride, amx_emu.data[t][r], amx_emu.colsb[t]);
}

static void amx_emu_zero(int t)
{
	if (amx_emu_ready(t))
		memset(amx_emu.data[t], 0, sizeof amx_emu.data[t]);
}

/* TDPBSUD / TDPBSSD: c.dword[m][n] += sum over k < a.colsb / 4, e < 4 of
 * signed a.byte[m][4k + e] * b.byte[k][4n + e] (unsigned for TDPBSUD,
 * signed for TDPBSSD), in wrapping 32-bit arithmetic. */
static void amx_emu_dpb(int c, int a, int b, int b_signed)
{
	const char *name = b_signed ? "TDPBSSD" : "TDPBSUD";
	if (!amx_emu_ready(c) || !amx_emu_ready(a) || !amx_emu_ready(b))
		return;
	char why[64];
	if (c == a || c == b || a == b) {
		snprintf(why, sizeof why, "%s names a register twice", name);
		amx_emu_fault(why, c);
		return;
	}
	if (amx_emu.colsb[a] % 4 || amx_emu.colsb[c] % 4 || amx_emu.colsb[a] / 4 != amx_emu.rows[b] ||
	    amx_emu.rows[c] != amx_emu.rows[a] || amx_emu.colsb[c] != amx_emu.colsb[b]) {
		snprintf(why, sizeof why, "%s shapes do not chain", name);
		amx_emu_fault(why, c);
		return;
	}
	for (int m = 0; m < amx_emu.rows[c]; m++)
		for (int n = 0; n < amx_emu.colsb[c] / 4; n++) {
			uint32_t acc;
			memcpy(&acc, &amx_emu.data[c][m][4 * n], sizeof acc);
			for (int k = 0; k < amx_emu.colsb[a] / 4; k++)
				for (int e = 0; e < 4; e++) {
					const uint8_t bv = amx_emu.data[b][k][4 * n + e];
					const int32_t bw = b_signed ? (int32_t)(int8_t)bv : (int32_t)bv;
					acc += (uint32_t)((int32_t)(int8_t)amx_emu.data[a][m][4 * k + e] * bw);
				}
			memcpy(&amx_emu.data[c][m][4 * n], &acc, sizeof acc);
		}
}

#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbsud
#undef _tile_dpbssd
#define _tile_loadconfig(cfg) amx_emu_loadconfig(cfg)
#define _tile_release() amx_emu_release()
#define _tile_loadd(t, base, stride) amx_emu_loadd(t, base, (long)(stride))
#define _tile_stored(t, base, stride) amx_emu_stored(t, base, (long)(stride))
#define _tile_zero(t) amx_emu_zero(t)
#define _tile_dpbsud(c, a, b) amx_emu_dpb(c, a, b, 0)
#define _tile_dpbssd(c, a, b) amx_emu_dpb(c, a, b, 1)

#endif
