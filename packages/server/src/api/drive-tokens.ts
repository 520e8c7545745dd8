// The service's S3 side of drives, which Berth does not have (decision 031): `POST /v0/drives/{name}/access-token`
// (a JWT for S3 calls against the drive's bucket) and `GET /v0/drives/jwks.json` (the key that verifies those
// tokens). On one machine a drive is reached by mounting it into a sandbox, so both answer a 501 problem saying
// so, instead of the bare 404 of an unknown route; the token's drive and the caller's role are checked first, as
// for any drive route (a missing drive is a 404).
import type { FastifyInstance } from 'fastify';
import { requireRole } from '../auth/require-role.js';
import { ApiError } from '../errors.js';
import type { Resources } from '../store/resources.js';

const NO_S3 =
  'Berth has no S3 endpoint for drives: mount the drive into a sandbox instead (sandbox.drives.mount, ' +
  'POST /drives/mount on the sandbox address)';

/** Public: the SDK fetches the key set without a credential. */
export const DRIVE_JWKS_PATH = '/drives/jwks.json';

export function registerDriveTokenRoutes(app: FastifyInstance, { resources }: { resources: Resources }) {
  app.get(DRIVE_JWKS_PATH, async () => {
    throw new ApiError(
      'NOT_IMPLEMENTED',
      `no drive access token is ever issued, so there is no key set. ${NO_S3}`,
    );
  });
  app.post('/drives/:name/access-token', async (req) => {
    const a = requireRole(req, 'member');
    await resources.mustGet(resources.kind('Drive'), a.workspace, [], (req.params as { name: string }).name);
    throw new ApiError('NOT_IMPLEMENTED', `drive access tokens are for S3 calls. ${NO_S3}`);
  });
}
