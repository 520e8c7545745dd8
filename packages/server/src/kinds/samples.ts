// A minimal valid body of every kind, one invalid body with the pointer its 422 names, and a change for
// a replace. Tests walk every kind with these; the CLI and docs can show them as examples.

export interface KindSample {
  /** Names of the parent objects the sample lives under, in path order. */
  parents: string[];
  valid: { metadata: { name: string; labels?: Record<string, string> }; spec: Record<string, any> };
  invalid: { body: unknown; pointer: string };
  /** Changes one field of the body in place (for a replace). */
  change(body: { metadata: Record<string, any>; spec: Record<string, any> }): void;
}

export const SAMPLES: Record<string, KindSample> = {
  Policy: {
    parents: [],
    valid: {
      metadata: { name: 'eu-only' },
      spec: { type: 'location', locations: [{ name: 'local', type: 'region' }] },
    },
    invalid: { body: { metadata: { name: 'p' }, spec: { type: 'speed' } }, pointer: '/spec/type' },
    change: ({ spec: s }) => {
      s.locations = [{ name: 'other', type: 'region' }];
    },
  },
  IntegrationConnection: {
    parents: [],
    valid: {
      metadata: { name: 'openai-main' },
      spec: { integration: 'openai', secret: { apiKey: 'sk-test-1' } },
    },
    invalid: {
      body: { metadata: { name: 'c' }, spec: { integration: 'telepathy' } },
      pointer: '/spec/integration',
    },
    change: ({ spec: s }) => {
      s.config = { baseUrl: 'https://llm.example.test/v1' };
    },
  },
  VolumeTemplate: {
    parents: [],
    valid: { metadata: { name: 'python-deps' }, spec: {} },
    invalid: { body: { metadata: { name: 't' }, spec: { defaultSize: 0 } }, pointer: '/spec/defaultSize' },
    change: ({ spec: s }) => {
      s.description = 'wheels for the data team';
    },
  },
  Volume: {
    parents: [],
    valid: { metadata: { name: 'data' }, spec: {} },
    invalid: { body: { metadata: { name: 'v' }, spec: { size: 'big' } }, pointer: '/spec/size' },
    change: ({ spec: s }) => {
      s.infrastructureId = 'local-dir';
    },
  },
  Drive: {
    parents: [],
    valid: { metadata: { name: 'shared' }, spec: { size: 16 } },
    invalid: {
      body: { metadata: { name: 'd' }, spec: { permissions: [{ mode: 'all' }] } },
      pointer: '/spec/permissions/0/mode',
    },
    change: ({ spec: s }) => {
      s.permissions = [{ labels: { team: 'red' }, mode: 'read' }];
    },
  },
  Model: {
    parents: [],
    valid: { metadata: { name: 'gpt' }, spec: { runtime: { type: 'openai', model: 'gpt-4o-mini' } } },
    invalid: {
      body: { metadata: { name: 'm' }, spec: { runtime: { type: 'oracle' } } },
      pointer: '/spec/runtime/type',
    },
    change: ({ spec: s }) => {
      s.runtime.model = 'gpt-4o';
    },
  },
  Agent: {
    parents: [],
    valid: { metadata: { name: 'helper' }, spec: { runtime: { memory: 1024 } } },
    invalid: {
      body: { metadata: { name: 'a' }, spec: { runtime: { maxScale: -1 } } },
      pointer: '/spec/runtime/maxScale',
    },
    change: ({ spec: s }) => {
      s.runtime.memory = 4096;
    },
  },
  Function: {
    parents: [],
    valid: { metadata: { name: 'mail-tools' }, spec: { type: 'mcp', runtime: { type: 'http-api' } } },
    invalid: { body: { metadata: { name: 'f' }, spec: { type: 'lambda' } }, pointer: '/spec/type' },
    change: ({ spec: s }) => {
      s.runtime.maxScale = 3;
    },
  },
  Application: {
    parents: [],
    valid: { metadata: { name: 'web' }, spec: { image: 'local/web:1', port: 3000, memory: 512 } },
    invalid: {
      body: { metadata: { name: 'w' }, spec: { image: 'local/web:1', port: 0 } },
      pointer: '/spec/port',
    },
    change: ({ spec: s }) => {
      s.port = 3001;
    },
  },
  Job: {
    parents: [],
    valid: { metadata: { name: 'nightly' }, spec: { runtime: { image: 'local/etl:1' } } },
    invalid: {
      body: { metadata: { name: 'j' }, spec: { runtime: { timeout: 0 } } },
      pointer: '/spec/runtime/timeout',
    },
    change: ({ spec: s }) => {
      s.runtime.maxConcurrentTasks = 4;
    },
  },
  Sandbox: {
    parents: [],
    // No retention: a deleted sandbox's record goes at once, as every other kind's does.
    valid: {
      metadata: { name: 'box' },
      spec: { runtime: { image: 'blaxel/base-image:latest' }, lifecycle: { terminatedRetention: '0s' } },
    },
    invalid: {
      body: { metadata: { name: 's' }, spec: { runtime: { ttl: 'forever' } } },
      pointer: '/spec/runtime/ttl',
    },
    // Memory and image cannot change on a running sandbox; its ttl can.
    change: ({ spec: s }) => {
      s.runtime.ttl = '2h';
    },
  },
  Preview: {
    parents: ['box'],
    valid: { metadata: { name: 'web' }, spec: { port: 3000, public: true } },
    invalid: { body: { metadata: { name: 'w' }, spec: { port: 70000 } }, pointer: '/spec/port' },
    change: ({ spec: s }) => {
      s.public = false;
    },
  },
  Vpc: {
    parents: [],
    valid: { metadata: { name: 'net' }, spec: {} },
    invalid: { body: { metadata: { name: 'Not_A_Label' }, spec: {} }, pointer: '/metadata/name' },
    change: ({ metadata }) => {
      metadata.displayName = 'Renamed';
    },
  },
  EgressGateway: {
    parents: ['net'],
    valid: { metadata: { name: 'gw' }, spec: { region: 'local' } },
    invalid: { body: { metadata: { name: 'g' }, spec: { region: 7 } }, pointer: '/spec/region' },
    change: ({ metadata }) => {
      metadata.displayName = 'Renamed';
    },
  },
  EgressIp: {
    parents: ['net', 'gw'],
    valid: { metadata: { name: 'ip1' }, spec: { ipFamily: 'IPv4' } },
    invalid: { body: { metadata: { name: 'i' }, spec: { ipFamily: 'IPv5' } }, pointer: '/spec/ipFamily' },
    change: ({ metadata }) => {
      metadata.displayName = 'Renamed';
    },
  },
};
