// Turns TypeBox schemas into the JSON Schema of an OpenAPI 3.1 document: symbol keys gone, every
// `$id`-named schema hoisted into components.schemas and referenced, records and literal unions
// rewritten into the forms code generators read best (additionalProperties, enum).
import type { TSchema } from '@sinclair/typebox';

export type JsonSchema = Record<string, any>;

const REF_PREFIX = '#/components/schemas/';
/** TypeBox spells a string-keyed record as this one pattern; it means "any key". */
const ANY_KEY = '^(.*)$';

export const schemaRef = (name: string) => ({ $ref: `${REF_PREFIX}${name}` });

/** Collects named schemas for components.schemas while converting the schemas that use them. */
export class SchemaCollector {
  readonly schemas: Record<string, JsonSchema> = {};
  private readonly texts = new Map<string, string>();
  private readonly wanted = new Set<string>();

  /** Adds `schema` under `name` (or its own `$id`) and returns a reference to it. */
  named(schema: TSchema, name?: string): JsonSchema {
    const plain = JSON.parse(JSON.stringify(schema)) as JsonSchema;
    const id = name ?? plain.$id;
    if (!id) throw new Error('a named schema needs a name or an $id');
    delete plain.$id;
    this.add(id, this.convert(plain));
    return schemaRef(id);
  }

  /** Converts `schema` inline; nested `$id`s are still hoisted into components. */
  inline(schema: TSchema | JsonSchema): JsonSchema {
    const plain = JSON.parse(JSON.stringify(schema)) as JsonSchema;
    if (plain.$id) return this.named(schema as TSchema);
    return this.convert(plain);
  }

  /** Names referenced but never defined; a self-contained document has none. */
  dangling(): string[] {
    return [...this.wanted].filter((n) => !(n in this.schemas));
  }

  private add(id: string, converted: JsonSchema) {
    const text = JSON.stringify(converted);
    const prev = this.texts.get(id);
    if (prev !== undefined && prev !== text) throw new Error(`two different schemas share the name ${id}`);
    this.texts.set(id, text);
    this.schemas[id] = converted;
  }

  private convert(node: JsonSchema): JsonSchema {
    if (Array.isArray(node)) return node.map((n) => this.convert(n));
    if (node === null || typeof node !== 'object') return node;
    if (typeof node.$id === 'string') {
      const { $id, ...rest } = node;
      this.add($id, this.convert(rest));
      return schemaRef($id);
    }
    if (typeof node.$ref === 'string' && !node.$ref.startsWith('#')) {
      this.wanted.add(node.$ref);
      return schemaRef(node.$ref);
    }
    const out: JsonSchema = {};
    for (const [k, v] of Object.entries(node)) {
      // Keys of `properties` are field names, not keywords: convert their values only.
      if (k === 'const' || k === 'enum' || k === 'default' || k === 'examples') out[k] = v;
      else if (
        (k === 'properties' || k === 'patternProperties' || k === '$defs') &&
        v &&
        typeof v === 'object'
      )
        out[k] = Object.fromEntries(
          Object.entries(v).map(([pk, pv]) => [pk, this.convert(pv as JsonSchema)]),
        );
      else out[k] = v !== null && typeof v === 'object' ? this.convert(v) : v;
    }
    return simplify(out);
  }
}

function simplify(s: JsonSchema): JsonSchema {
  const pp = s.patternProperties;
  if (
    pp &&
    !s.properties &&
    Object.keys(pp).length === 1 &&
    ANY_KEY in pp &&
    s.additionalProperties === undefined
  ) {
    const { patternProperties: _, ...rest } = s;
    return { ...rest, additionalProperties: pp[ANY_KEY] };
  }
  if (Array.isArray(s.anyOf) && s.anyOf.length > 0) {
    const branches = s.anyOf as JsonSchema[];
    const type = branches[0].type;
    const plainConst = (b: JsonSchema) =>
      'const' in b && b.type === type && Object.keys(b).every((k) => k === 'const' || k === 'type');
    if (typeof type === 'string' && branches.every(plainConst)) {
      const { anyOf: _, ...rest } = s;
      return { ...rest, type, enum: branches.map((b) => b.const) };
    }
  }
  return s;
}
