// The service's features with one job's handler wrapped, for tests and benches that watch or hold
// a job as the real worker runs it.
import type { JobHandler, JobSpec } from '../../src/core/jobs.js';
import type { Feature } from '../../src/feature.js';
import { FEATURES } from '../../src/features.js';

export function withJobHandler(name: string, wrap: (real: JobHandler<JobSpec>) => JobHandler<JobSpec>): Feature[] {
  return FEATURES.map((feature) => {
    const jobs = feature.jobs;
    if (!jobs || !Object.hasOwn(jobs.specs, name)) return feature;
    return {
      ...feature,
      jobs: {
        ...jobs,
        handlers: (ctx, registry) => {
          const real = jobs.handlers(ctx, registry);
          return { ...real, [name]: wrap(real[name]!) };
        },
      },
    };
  });
}
