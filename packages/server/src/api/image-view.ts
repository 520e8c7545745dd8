// How an image is shown to a workspace (decisions 018, 037, 051): Berth's fields (id, the workspace's own names,
// sizes, layers, config, whether its sandboxes run on it) and, beside them, the service's shape (`metadata`, `spec`
// with the repository's tags), so both `berth image` and @blaxel/core's image calls read one answer. The service's
// `{resourceType}/{imageName}` is the name's first part and the rest: `sandboxes/box` is the repository
// docker.io/sandboxes/box.
import { repositoryOf, type HeldImage, type ImageStore } from '../runtime/images/image-store.js';

/** `python` of docker.io/library/python, `team/app` of docker.io/team/app, registries other than Docker Hub kept. */
export function shortName(repository: string): string {
  return repository.replace(/^docker\.io\/(library\/)?/, '');
}

const tagOf = (canonical: string) => {
  const at = canonical.indexOf('@');
  if (at >= 0) return canonical.slice(at + 1);
  return canonical.slice(repositoryOf(canonical).length + 1);
};

export function imageView(images: ImageStore, workspace: string, i: HeldImage) {
  const first = i.references[0];
  const repo = first ? repositoryOf(first) : i.id;
  const short = first ? shortName(repo) : i.id;
  const parts = short.split('/');
  const tags = first ? images.tagsOf(workspace, first) : [];
  const lastDeployedAt = images.lastDeployed(workspace, [i.id, ...tags.map((t) => t.image.id)]);
  const shared = images.shares
    .of(workspace)
    .find(
      (s) =>
        s.status === 'active' &&
        s.target === workspace &&
        i.references.some((r) => s.references[r] === i.id.slice(7)),
    );
  return {
    id: i.id,
    references: i.references,
    digest: i.digest,
    size: i.size,
    unpackedSize: i.unpackedBytes,
    layers: i.layers.map((l) => ({ digest: l.digest, size: l.size })),
    config: i.config,
    inUse: images.inUse(i, workspace),
    createdAt: i.createdAt,
    metadata: {
      name: parts.length > 1 ? parts.slice(1).join('/') : short,
      ...(parts.length > 1 ? { resourceType: parts[0] } : {}),
      displayName: repo,
      workspace,
      createdAt: i.createdAt,
      updatedAt: i.createdAt,
      ...(lastDeployedAt ? { lastDeployedAt } : {}),
      ...(shared ? { sourceWorkspace: shared.source } : {}),
    },
    spec: {
      size: i.unpackedBytes,
      tags: tags.map((t) => ({
        name: tagOf(t.name),
        size: t.image.unpackedBytes,
        createdAt: t.image.createdAt,
        updatedAt: t.image.createdAt,
      })),
    },
  };
}

export type ImageView = ReturnType<typeof imageView>;
