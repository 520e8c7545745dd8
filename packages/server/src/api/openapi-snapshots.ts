// Snapshots, restore, fork, archive and unarchive for the OpenAPI document (decision 053), in the service's shapes
// (its SandboxSnapshot, SandboxForkRequest/Response, SandboxRestoreResponse); answers are api/snapshots.ts's.
import { Type } from '../kinds/typebox.js';
import type { ExtraPaths } from './openapi-extra.js';

const opt = Type.Optional;
const Str = Type.String;
const Int = Type.Integer;
const Bool = Type.Boolean;

const Snapshot = Type.Object(
  {
    id: Str({ description: 'unique in the workspace; what the workspace-level routes take' }),
    name: Str({ description: 'unique among the snapshots of its source' }),
    status: Str({ description: 'ready (a snapshot is recorded only once its files are whole)' }),
    workspace: Str(),
    createdAt: Str(),
    createdBy: opt(Str()),
    sandboxName: Str({ description: 'the source sandbox (kept for compatibility; read source.name)' }),
    source: Type.Object({ kind: Str(), name: Str(), deleted: Bool() }),
    spec: Type.Object(
      {
        image: opt(Str()),
        memory: opt(Int()),
        ports: opt(Type.Unknown()),
        region: opt(Str()),
        holds: Type.Object(
          { files: Bool(), memory: Bool(), processes: Bool(), volumes: Bool() },
          { description: 'what the snapshot holds: files only on this kernel (no checkpoint of memory)' },
        ),
        note: Str(),
        sizeBytes: Int({
          description: 'bytes of its own layer (what the sandbox wrote since its last stack)',
        }),
        layers: Int({ description: 'snapshot layers it stands on, its own included' }),
        pausedMs: Type.Number({ description: 'how long the source was frozen for the capture' }),
      },
      { additionalProperties: true },
    ),
  },
  { $id: 'SandboxSnapshot', additionalProperties: true },
);
const SnapshotRequest = Type.Object({
  name: opt(Str({ description: 'unique among the source sandbox’s snapshots; generated when absent' })),
  source: opt(Type.Object({ name: Str(), kind: opt(Str({ description: 'sandbox' })) })),
});
const ForkRequest = Type.Object(
  {
    targetName: Str({ description: 'the new sandbox' }),
    targetType: Str({ description: 'sandbox (application is refused: Berth has no Application kind)' }),
    snapshotId: opt(Str({ description: 'fork this snapshot instead of capturing the sandbox now' })),
    envs: opt(Type.Array(Type.Object({ name: Str(), value: Str() }))),
    port: opt(Int({ description: 'applications only: refused' })),
    traffic: opt(Int({ description: 'applications only: refused' })),
    customDomain: opt(Str({ description: 'applications only: refused' })),
    prefix: opt(Str({ description: 'applications only: refused' })),
  },
  { $id: 'SandboxForkRequest' },
);
const ForkResponse = Type.Object(
  { name: Str(), snapshotId: Str(), type: Str() },
  { $id: 'SandboxForkResponse' },
);
const Sandbox = Type.Unknown({ description: 'the sandbox, as GET /sandboxes/{sandboxName} answers it' });
const SNAP = { tag: 'Snapshot' } as const;
const SandboxName = { sandboxName: Str() };
const SnapshotName = {
  snapshotName: Str({ description: 'a snapshot id (or a name only one snapshot has)' }),
};

export const SNAPSHOT_PATHS: ExtraPaths = {
  '/snapshots': {
    get: {
      ...SNAP,
      operationId: 'listSnapshots',
      summary: 'The workspace’s snapshots, newest first by default, those whose source is deleted included',
      query: {
        limit: Int({ minimum: 1 }),
        cursor: Str(),
        sort: Str({ description: 'createdAt:desc (default), createdAt:asc, name:asc or name:desc' }),
        q: Str({ description: 'keeps snapshots whose name or source contains this' }),
      },
      versioned: true,
      response: Type.Array(Snapshot),
    },
    post: {
      ...SNAP,
      operationId: 'createSnapshot',
      summary:
        'Capture a snapshot of a sandbox (`source.name`): its files, the sandbox frozen for the copy only; 409 on a name its source already has',
      body: SnapshotRequest,
      response: Snapshot,
    },
  },
  '/snapshots/{snapshotName}': {
    get: {
      ...SNAP,
      operationId: 'getSnapshot',
      summary: 'A snapshot',
      params: SnapshotName,
      response: Snapshot,
    },
    delete: {
      ...SNAP,
      operationId: 'deleteSnapshot',
      summary: 'Delete a snapshot (its layers go once nothing stands on them)',
      params: SnapshotName,
      status: 204,
    },
  },
  '/snapshots/{snapshotName}/fork': {
    post: {
      ...SNAP,
      operationId: 'forkSnapshot',
      summary:
        'A new sandbox on the snapshot’s files, whether or not its source still exists; answered once it runs',
      params: SnapshotName,
      body: ForkRequest,
      response: ForkResponse,
    },
  },
  '/snapshots/{snapshotName}/image': {
    post: {
      ...SNAP,
      operationId: 'imageFromSnapshot',
      summary:
        'Install the snapshot as an image of the workspace (its layers over the image its source ran): sandboxes, agents, functions and jobs start from it by `name`. 409 for a snapshot of a sandbox on the default image',
      params: SnapshotName,
      body: Type.Object({ name: Str({ description: 'e.g. my-template:1' }) }),
      response: Type.Unknown({ description: 'the image, as GET /images/{imageName} answers it' }),
    },
  },
  '/sandboxes/{sandboxName}/snapshots': {
    get: {
      ...SNAP,
      operationId: 'listSandboxSnapshots',
      summary: 'The snapshots captured from the sandbox, newest first (a bare array in every version)',
      params: SandboxName,
      response: Type.Array(Snapshot),
    },
    post: {
      ...SNAP,
      operationId: 'createSandboxSnapshot',
      summary: 'Capture a snapshot of the sandbox',
      params: SandboxName,
      body: SnapshotRequest,
      bodyOptional: true,
      response: Snapshot,
    },
  },
  '/sandboxes/{sandboxName}/snapshots/{snapshotId}': {
    delete: {
      ...SNAP,
      operationId: 'deleteSandboxSnapshot',
      summary: 'Delete one of the sandbox’s snapshots (by id or name)',
      params: { ...SandboxName, snapshotId: Str() },
      status: 204,
    },
  },
  '/sandboxes/{sandboxName}/snapshots/{snapshotId}/restore': {
    post: {
      ...SNAP,
      operationId: 'restoreSandboxSnapshot',
      summary:
        'Restore the sandbox to one of its snapshots: same name, URLs and previews, processes started fresh; answers without waiting for the start',
      params: { ...SandboxName, snapshotId: Str() },
      response: Type.Object({ name: Str(), snapshotId: Str() }, { $id: 'SandboxRestoreResponse' }),
    },
  },
  '/sandboxes/{sandboxName}/fork': {
    post: {
      ...SNAP,
      operationId: 'forkSandbox',
      summary:
        'A new sandbox with the files of this one (captured now as a snapshot, or `snapshotId`); answered once it runs',
      params: SandboxName,
      body: ForkRequest,
      response: ForkResponse,
    },
  },
  '/sandboxes/{sandboxName}/archive': {
    post: {
      ...SNAP,
      operationId: 'archiveSandbox',
      summary:
        'Archive the sandbox: ARCHIVING, then ARCHIVED once its files are kept as a snapshot layer and its instance and memory are freed',
      params: SandboxName,
      response: Sandbox,
    },
  },
  '/sandboxes/{sandboxName}/unarchive': {
    post: {
      ...SNAP,
      operationId: 'unarchiveSandbox',
      summary:
        'Start an archived sandbox again on its files: UNARCHIVING, then DEPLOYED (same name, URLs, previews)',
      params: SandboxName,
      response: Sandbox,
    },
  },
};
