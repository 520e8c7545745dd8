// The image store's routes for the OpenAPI document (decisions 018, 037, 051): Berth's own (pull, import, build,
// names by their tail) and the service's shape (`{resourceType}/{imageName}`, tags, cleanup, sharing between
// workspaces). Answers are what api/image-view.ts shows.
import { Type } from '../kinds/typebox.js';
import type { ExtraPaths } from './openapi-extra.js';

const opt = Type.Optional;
const Str = Type.String;
const Int = Type.Integer;

const Tag = Type.Object({ name: Str(), size: Int(), createdAt: Str(), updatedAt: Str() });
const Image = Type.Object(
  {
    id: Str(),
    references: Type.Array(Str(), { description: "this workspace's names of the image" }),
    digest: Str(),
    size: Int({ description: 'compressed bytes of the layers' }),
    unpackedSize: Int({ description: 'bytes on disk, as the image quota counts them' }),
    layers: Type.Array(Type.Object({ digest: Str(), size: Int() })),
    config: Type.Unknown(),
    inUse: Type.Boolean(),
    createdAt: Str(),
    metadata: Type.Object(
      {
        name: Str(),
        resourceType: opt(Str({ description: "the name's first part, when it has two" })),
        displayName: Str({ description: 'the repository' }),
        workspace: Str(),
        createdAt: Str(),
        updatedAt: Str(),
        lastDeployedAt: opt(
          Str({ description: 'when a sandbox or build of the workspace last started on it' }),
        ),
        sourceWorkspace: opt(
          Str({ description: 'the workspace that shared it, for a name a share brought' }),
        ),
      },
      { additionalProperties: true },
    ),
    spec: Type.Object({ size: Int(), tags: Type.Array(Tag) }, { additionalProperties: true }),
  },
  { $id: 'Image', additionalProperties: true },
);
const ImageName = {
  imageName: Str({ description: 'an image reference held by the workspace, percent-encoded (`/` as %2F)' }),
};
const TypedName = {
  resourceType: Str({ description: "the name's first part (`sandboxes` of sandboxes/box)" }),
  imageName: Str({ description: 'the rest of the name, with a tag or not' }),
};
const PendingShare = Type.Object(
  {
    id: Str(),
    imageName: Str(),
    resourceType: opt(Str()),
    sourceWorkspace: Str(),
    targetWorkspace: Str(),
    sharedBy: Str(),
    createdAt: Str(),
    expiresAt: Str(),
    hasConflict: opt(Type.Boolean({ description: 'the target holds one of the names for another image' })),
  },
  { $id: 'PendingImageShare', additionalProperties: true },
);
const ShareTarget = Type.Object(
  {
    workspace: Str(),
    status: Str({ description: 'pending or active' }),
    accountId: Str(),
    pendingShareId: opt(Str()),
  },
  { $id: 'ImageShareTarget' },
);
const IMAGE = { tag: 'Image' } as const;

export const IMAGE_PATHS: ExtraPaths = {
  '/images': {
    get: {
      ...IMAGE,
      operationId: 'listImages',
      summary: 'Images the workspace holds by name or its sandboxes run on',
      response: Type.Array(Image),
    },
    post: {
      ...IMAGE,
      operationId: 'pullImage',
      summary:
        'Pull an image from a registry into the workspace (`reference`), or, as the service’s createImage, pull `image` and name it `resourceType/name`',
      body: Type.Object({
        reference: opt(Str({ minLength: 1, description: 'e.g. python:3.12-slim' })),
        image: opt(Str({ description: 'createImage: a pre-built image to pull' })),
        name: opt(Str({ description: 'createImage: the name to give it' })),
        resourceType: opt(Str({ description: "createImage: the name's first part" })),
      }),
      response: Image,
    },
    delete: {
      ...IMAGE,
      operationId: 'cleanupImages',
      summary:
        'Let go of every name no sandbox, agent, function or job of the workspace names (and its sandboxes do not run), and drop the Dockerfile layer cache',
      response: Type.Object({ deleted: Int(), message: Str() }),
    },
  },
  '/images/import': {
    post: {
      ...IMAGE,
      operationId: 'importImage',
      summary:
        'Import a `docker save` or OCI layout tar (the body) into the workspace; in a cluster, answered once a second node holds it (header `x-berth-image-copies`, decision 087)',
      query: { name: Str({ description: 'the name to hold it by (default: the names the archive gives)' }) },
      body: Type.String({ format: 'binary' }),
      bodyType: 'application/x-tar',
      response: Type.Array(Image),
    },
  },
  '/images/build': {
    post: {
      ...IMAGE,
      operationId: 'buildImage',
      summary:
        'Build an image from a Dockerfile: the body is the context (tar or tar.gz); the log streams as NDJSON ({"stream"}), ending with {"aux": {"ID"}, "image"} or {"error", "errorDetail"}',
      query: {
        t: Str({ description: 'the name to give the image, e.g. app:1' }),
        dockerfile: Str({ description: 'its path in the context (default Dockerfile)' }),
        target: Str({ description: 'the stage to build (default: the last)' }),
        buildArg: Str({ description: 'NAME=value, repeated' }),
        noCache: Type.Boolean({ description: 'run every step again' }),
        network: Str({ description: 'default, or none (RUN steps reach nothing)' }),
        allowDomain: Str({
          description: 'RUN steps reach only these domains (repeated, or comma-separated)',
        }),
      },
      body: Type.String({ format: 'binary' }),
      bodyType: 'application/x-tar',
      response: Str(),
      responseType: 'application/x-ndjson',
    },
  },
  '/images/{imageName}': {
    get: { ...IMAGE, operationId: 'getImage', summary: 'An image', params: ImageName, response: Image },
    delete: {
      ...IMAGE,
      operationId: 'releaseImage',
      summary: "Let go of the workspace's name for an image (409 while a sandbox runs on it)",
      params: ImageName,
      response: Image,
    },
  },
  '/images/{resourceType}/{imageName}': {
    get: {
      ...IMAGE,
      operationId: 'getImageOfType',
      summary:
        'The image `resourceType/imageName` names (without a tag: `:latest`, else the newest tag), with its tags',
      params: TypedName,
      response: Image,
    },
    delete: {
      ...IMAGE,
      operationId: 'deleteImage',
      summary:
        'Let go of the name (without a tag: `:latest` when held, else every tag; 409 while a sandbox runs on it)',
      params: TypedName,
      response: Image,
    },
  },
  '/images/{resourceType}/{imageName}/tags/{tagName}': {
    delete: {
      ...IMAGE,
      operationId: 'deleteImageTag',
      summary: 'Let go of one tag',
      params: { ...TypedName, tagName: Str() },
      response: Image,
    },
  },
  '/images/{resourceType}/{imageName}/share': {
    get: {
      ...IMAGE,
      operationId: 'listImageShares',
      summary: 'The workspaces the image is shared with, pending or accepted',
      params: TypedName,
      response: Type.Array(ShareTarget),
    },
    post: {
      ...IMAGE,
      role: 'admin',
      operationId: 'shareImage',
      summary: 'Offer the image to another workspace: pending until an admin there accepts it',
      params: TypedName,
      body: Type.Object({
        targetWorkspace: Str(),
        targetAccountId: opt(Str({ description: 'accepted, not used' })),
      }),
      status: 202,
      response: PendingShare,
    },
  },
  '/images/{resourceType}/{imageName}/share/{targetWorkspace}': {
    delete: {
      ...IMAGE,
      role: 'admin',
      operationId: 'unshareImage',
      summary: "Revoke a share, pending or accepted (the target's names of the shared image go)",
      params: { ...TypedName, targetWorkspace: Str() },
      response: Image,
    },
  },
  '/pending-image-shares': {
    get: {
      ...IMAGE,
      operationId: 'listPendingImageShares',
      summary: 'Pending shares to this workspace (incoming, the default) or from it (outgoing)',
      query: { direction: Str({ description: 'incoming or outgoing' }) },
      response: Type.Array(PendingShare),
    },
  },
  '/pending-image-shares/{pendingShareId}/accept': {
    post: {
      ...IMAGE,
      role: 'admin',
      operationId: 'acceptImageShare',
      summary:
        "Accept a share to this workspace: its names are bound here, charged to this workspace's image quota",
      params: { pendingShareId: Str() },
      query: { force: Type.Boolean({ description: 'replace names this workspace holds for another image' }) },
      response: Image,
    },
  },
  '/pending-image-shares/{pendingShareId}/decline': {
    post: {
      ...IMAGE,
      role: 'admin',
      operationId: 'declineImageShare',
      summary: 'Decline a share to this workspace',
      params: { pendingShareId: Str() },
      status: 204,
    },
  },
};
