// Types of render.mjs, for the SDK test that imports it.
export function renderDocument(doc: unknown): string;
export function renderTypes(doc: unknown): Promise<string>;
export function renderKinds(kinds: unknown[]): string;
