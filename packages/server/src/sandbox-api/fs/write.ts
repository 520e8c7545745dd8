// PUT /filesystem/{path}: JSON `{content, isDirectory, permissions}` writes a text file or makes a directory;
// a multipart form writes its `file` part as raw bytes (then applies its `permissions` field). Parents are made.
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { SandboxApi } from '../context.js';
import { badRequest, fsError, readJson, sendJson } from '../http.js';
import { PathResolver } from '../paths.js';
import type { Handler } from '../router.js';
import { type FileRequest, parsePermissions, type SuccessResponse } from '../schema.js';
import { boundaryOf, readForm } from './form-data.js';

export function writePath(api: SandboxApi): Handler {
  return async ({ req, res, params }) => {
    const abs = await api.paths.resolve(PathResolver.decode(params.path));
    const body: SuccessResponse = boundaryOf(req.headers['content-type'])
      ? await writeForm(abs, req)
      : await writeJson(abs, (await readJson(req)) as FileRequest);
    sendJson(res, 200, body);
  };
}

async function writeJson(abs: string, body: FileRequest): Promise<SuccessResponse> {
  if (typeof body !== 'object' || body === null) throw badRequest('body must be a JSON object');
  if (body.content !== undefined && typeof body.content !== 'string')
    throw badRequest('content must be a string');
  const perm = parsePermissions(body.permissions);
  if (!perm.ok) throw badRequest(perm.reason);
  try {
    if (body.isDirectory === true) {
      await mkdir(abs, { recursive: true, mode: perm.value ?? 0o755 });
      if (perm.value !== undefined) await chmod(abs, perm.value);
      return { message: 'Directory created successfully', path: abs };
    }
    await writeText(abs, body.content ?? '', perm.value);
    return { message: 'File created/updated successfully', path: abs };
  } catch (err) {
    throw fsError(err, abs);
  }
}

/** Writes a text file, making its parents; `mode` (when given) is applied even to an existing file. */
export async function writeText(abs: string, content: string, mode?: number): Promise<void> {
  await mkdir(dirname(abs), { recursive: true, mode: 0o755 });
  await writeFile(abs, content, { mode: mode ?? 0o644 });
  if (mode !== undefined) await chmod(abs, mode);
}

async function writeForm(abs: string, req: Parameters<Handler>[0]['req']): Promise<SuccessResponse> {
  let wrote = false;
  const form = await readForm(req, async (part) => {
    if (part.field !== 'file' || wrote) return null;
    wrote = true;
    try {
      await mkdir(dirname(abs), { recursive: true, mode: 0o755 });
    } catch (err) {
      throw fsError(err, abs);
    }
    return createWriteStream(abs, { mode: 0o644 });
  }).catch((err) => Promise.reject(fsError(err, abs)));
  if (!wrote) throw badRequest("missing 'file' field in multipart form");
  const perm = parsePermissions(form.fields.permissions);
  if (!perm.ok) throw badRequest(perm.reason);
  if (perm.value !== undefined)
    await chmod(abs, perm.value).catch((err) => Promise.reject(fsError(err, abs)));
  return { message: 'Binary file uploaded successfully', path: abs };
}
