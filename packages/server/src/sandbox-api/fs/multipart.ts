// The multipart upload routes: POST /filesystem-multipart/initiate/{path} `{permissions}`, PUT
// /filesystem-multipart/{id}/part?partNumber=N (form field `file`), POST .../{id}/complete `{parts}`, DELETE
// .../{id}/abort, and the listings GET /filesystem-multipart and GET .../{id}/parts.
import { createWriteStream } from 'node:fs';
import type { SandboxApi } from '../context.js';
import { badRequest, fsError, notFound, readJson, sendJson } from '../http.js';
import { PathResolver } from '../paths.js';
import type { Handler } from '../router.js';
import {
  type MultipartCompleteRequest,
  type MultipartInitiateResponse,
  type MultipartPartResponse,
  parsePermissions,
} from '../schema.js';
import { readForm } from './form-data.js';
import { MAX_PART_NUMBER, type Upload } from './upload-store.js';

export function initiateUpload(api: SandboxApi): Handler {
  return async ({ req, res, params }) => {
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    const body = (await readJson(req)) as { permissions?: unknown };
    const perm = parsePermissions(body?.permissions);
    if (!perm.ok) throw badRequest(perm.reason);
    const upload = await api.uploads.initiate(abs, perm.value ?? 0o644);
    sendJson(res, 200, { uploadId: upload.uploadId, path: abs } satisfies MultipartInitiateResponse);
  };
}

export function uploadPart(api: SandboxApi): Handler {
  return async ({ req, res, params, query }) => {
    const upload = uploadOr404(api, params.id);
    const partNumber = Number(query.get('partNumber'));
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > MAX_PART_NUMBER)
      throw badRequest(`partNumber must be an integer from 1 to ${MAX_PART_NUMBER}`);
    let got = false;
    const form = await readForm(req, (part) => {
      if (part.field !== 'file' || got) return null;
      got = true;
      return createWriteStream(api.uploads.partFile(upload, partNumber));
    });
    const file = form.files.find((f) => f.field === 'file');
    if (!got || !file) throw badRequest("missing 'file' field in multipart form");
    const part = await api.uploads.recordPart(upload, partNumber, file.size);
    sendJson(res, 200, { partNumber, etag: part.etag, size: part.size } satisfies MultipartPartResponse);
  };
}

export function completeUpload(api: SandboxApi): Handler {
  return async ({ req, res, params }) => {
    const upload = uploadOr404(api, params.id);
    const body = (await readJson(req)) as MultipartCompleteRequest;
    const listed = Array.isArray(body?.parts) ? body.parts : [];
    if (listed.length === 0) throw badRequest('at least one part is required');
    const order = [...listed].sort((a, b) => (a.partNumber ?? 0) - (b.partNumber ?? 0));
    for (const p of order) {
      const have = p.partNumber !== undefined ? upload.parts.get(p.partNumber) : undefined;
      if (!have) throw badRequest(`part ${p.partNumber} was not uploaded`);
      if (p.etag && p.etag.replace(/"/g, '') !== have.etag)
        throw badRequest(`part ${p.partNumber}: etag does not match`);
    }
    // The target was checked at initiate; a symlink planted since must not redirect the write.
    await api.paths.check(upload.path);
    await api.uploads
      .complete(
        upload,
        order.map((p) => p.partNumber!),
      )
      .catch((err) => Promise.reject(fsError(err, upload.path)));
    sendJson(res, 200, { message: 'Multipart upload completed successfully', path: upload.path });
  };
}

export function abortUpload(api: SandboxApi): Handler {
  return async ({ res, params }) => {
    await api.uploads.abort(uploadOr404(api, params.id));
    sendJson(res, 200, { message: 'Multipart upload aborted successfully' });
  };
}

export function listUploads(api: SandboxApi): Handler {
  return ({ res }) => sendJson(res, 200, { uploads: api.uploads.list().map(describe) });
}

export function listParts(api: SandboxApi): Handler {
  return ({ res, params }) => {
    const upload = uploadOr404(api, params.id);
    sendJson(res, 200, { uploadId: upload.uploadId, parts: [...upload.parts.values()] });
  };
}

function uploadOr404(api: SandboxApi, id: string): Upload {
  const upload = api.uploads.get(id);
  if (!upload) throw notFound(`upload ${id} not found`);
  return upload;
}

function describe(u: Upload) {
  return {
    uploadId: u.uploadId,
    path: u.path,
    permissions: u.permissions,
    initiatedAt: u.initiatedAt.toISOString(),
    parts: Object.fromEntries([...u.parts].map(([n, p]) => [String(n), p])),
  };
}
