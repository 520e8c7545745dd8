// Why an image could not be had, as a kind a caller can act on (4xx at the API, FAILED with the reason on a
// sandbox) and a message that names the image. Never carries a credential.

export type ImageErrorCode =
  | 'INVALID_REFERENCE'
  | 'NOT_FOUND'
  | 'UNAUTHORIZED'
  | 'ARCHITECTURE'
  | 'UNREACHABLE'
  /** The registry's address is one the outbound rules close (outbound/): never contacted. */
  | 'REFUSED'
  | 'CORRUPT'
  | 'TOO_LARGE'
  | 'UNSAFE_LAYER'
  | 'UNSUPPORTED'
  | 'IN_USE'
  /** A name the workspace holds already stands for another image (accepting a share). */
  | 'CONFLICT'
  | 'QUOTA_EXCEEDED';

export class ImageError extends Error {
  constructor(
    readonly code: ImageErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ImageError';
  }
}
