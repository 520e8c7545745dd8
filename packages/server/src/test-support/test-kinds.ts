// Two minimal kinds for tests of the store pipeline and the controllers: one with a status, one without.
import { Type } from '../kinds/typebox.js';
import type { KindDescriptor } from '../kinds/types.js';

export const widget: KindDescriptor = {
  kind: 'Widget',
  plural: 'widgets',
  path: '/widgets',
  nameParam: 'widgetName',
  description: 'a kind for these tests',
  spec: Type.Object({ enabled: Type.Optional(Type.Boolean()) }),
  hasStatus: true,
};

export const note: KindDescriptor = {
  ...widget,
  kind: 'Note',
  plural: 'notes',
  path: '/notes',
  hasStatus: false,
};
