/* spec_accept.c — exact acceptance of a token drafted from another
 * distribution (speculative sampling: Leviathan et al. 2023, Chen et al.
 * 2023). A token x drawn from the draft's q is kept with probability
 * min(1, p(x)/q(x)); otherwise the replacement is drawn from the residual
 * norm(max(0, p - q)). The emitted token is then distributed exactly as p,
 * whatever q is (tests/test_spec.c checks this with a chi-square test). */
#include "spec.h"

#include <string.h>

#include "sample.h"

bool spec_accept_draft(const float *p, const float *q, int64_t V, int32_t x, double u_accept,
		       double u_resample, int32_t *out)
{
	const float px = p[x], qx = q[x];
	/* u < p/q without dividing; q(x) = 0 cannot have been drawn, but
	 * then any p(x) > 0 accepts */
	if ((double)u_accept * qx < px || (qx <= 0.0f && px > 0.0f)) {
		*out = x;
		return true;
	}
	double z = 0;
	for (int64_t i = 0; i < V; i++)
		z += p[i] > q[i] ? (double)(p[i] - q[i]) : 0.0;
	/* p == q (up to rounding): the residual is empty; p itself is right */
	const bool from_p = !(z > 1e-12);
	if (from_p)
		z = 0;
	if (from_p)
		for (int64_t i = 0; i < V; i++)
			z += p[i];
	double target = u_resample * z, cum = 0;
	int32_t last = x;
	for (int64_t i = 0; i < V; i++) {
		double w = from_p ? p[i] : (p[i] > q[i] ? (double)(p[i] - q[i]) : 0.0);
		if (w <= 0)
			continue;
		last = (int32_t)i;
		cum += w;
		if (target < cum) {
			*out = (int32_t)i;
			return false;
		}
	}
	*out = last; /* rounding at the very top of the range */
	return false;
}

bool spec_accept_sampled(struct sampler *s, float *logits, const float *q, int64_t V, int32_t x,
			 float *p, int32_t *out)
{
	int64_t n = sampler_dist(s, logits);
	const int32_t *ids;
	const float *probs;
	sampler_candidates(s, &ids, &probs);
	memset(p, 0, (size_t)V * sizeof *p);
	for (int64_t c = 0; c < n; c++)
		p[ids[c]] = probs[c];
	double u1 = sampler_uniform(s), u2 = sampler_uniform(s);
	return spec_accept_draft(p, q, V, x, u1, u2, out);
}
