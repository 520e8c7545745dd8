// An OpenAI chat completions request as an Anthropic Messages request: system prompts lifted out, tool
// calls and tool results as tool_use / tool_result blocks, images as image blocks, consecutive turns of
// one role merged (Anthropic wants user and assistant to alternate).

type Block = Record<string, unknown>;
interface AnthropicMessage {
  role: 'user' | 'assistant';
  content: Block[];
}

const DATA_URL = /^data:([^;,]+);base64,(.*)$/s;

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((p) => p?.type === 'text' && typeof p.text === 'string')
    .map((p) => p.text)
    .join('\n');
}

function mediaBlock(url: string, type: 'image' | 'document'): Block {
  const m = DATA_URL.exec(url);
  if (m) return { type, source: { type: 'base64', media_type: m[1], data: m[2] } };
  return { type, source: { type: 'url', url } };
}

function userBlocks(content: unknown): Block[] {
  if (typeof content === 'string') return content ? [{ type: 'text', text: content }] : [];
  if (!Array.isArray(content)) return [];
  const out: Block[] = [];
  for (const p of content) {
    if (p?.type === 'text' && typeof p.text === 'string') out.push({ type: 'text', text: p.text });
    else if (p?.type === 'image_url') {
      const url = typeof p.image_url === 'string' ? p.image_url : p.image_url?.url;
      if (typeof url === 'string') out.push(mediaBlock(url, 'image'));
    } else if (p?.type === 'file' && typeof p.file?.file_data === 'string')
      out.push(mediaBlock(p.file.file_data, 'document'));
  }
  return out;
}

function parseArguments(args: unknown): unknown {
  if (typeof args !== 'string') return args ?? {};
  if (!args.trim()) return {};
  try {
    return JSON.parse(args);
  } catch {
    // Anthropic needs an object; keep what the model produced rather than fail the call.
    return { arguments: args };
  }
}

function toolChoice(choice: unknown, parallel: unknown): Block | undefined {
  let out: Block | undefined;
  if (choice === 'auto') out = { type: 'auto' };
  else if (choice === 'none') out = { type: 'none' };
  else if (choice === 'required') out = { type: 'any' };
  else if (choice && typeof choice === 'object' && (choice as any).function?.name)
    out = { type: 'tool', name: (choice as any).function.name };
  if (parallel === false) out = { ...(out ?? { type: 'auto' }), disable_parallel_tool_use: true };
  return out;
}

/** The tool through which an OpenAI `response_format` is asked of Anthropic (whose answer is its input). */
export const STRUCTURED_TOOL = 'structured_output';

/**
 * OpenAI's JSON mode and structured output as Anthropic understands them: a tool whose input schema is the
 * requested schema, forced with tool_choice, so the model's answer is a JSON object that fits it. The
 * translation back turns that tool call into the message's content. Undefined when no JSON is asked for.
 */
function structuredTool(format: any): Block | undefined {
  if (format?.type === 'json_schema') {
    const s = format.json_schema ?? {};
    const schema = s.schema && typeof s.schema === 'object' ? s.schema : { type: 'object' };
    return {
      name: STRUCTURED_TOOL,
      description: `Answer by calling this tool with the response${s.name ? ` (${s.name})` : ''}${s.description ? `: ${s.description}` : ''}.`,
      input_schema: schema.type === 'object' ? schema : { type: 'object', properties: { value: schema } },
    };
  }
  if (format?.type === 'json_object')
    return {
      name: STRUCTURED_TOOL,
      description: 'Answer by calling this tool with the response as a JSON object.',
      input_schema: { type: 'object', additionalProperties: true },
    };
  return undefined;
}

export function chatToMessages(body: any, model: string, maxTokens: number): Record<string, unknown> {
  const system: string[] = [];
  const messages: AnthropicMessage[] = [];
  const push = (role: AnthropicMessage['role'], blocks: Block[]) => {
    if (!blocks.length) return;
    const last = messages.at(-1);
    if (last && last.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  };
  for (const m of Array.isArray(body.messages) ? body.messages : []) {
    if (m?.role === 'system' || m?.role === 'developer') {
      const t = textOf(m.content);
      if (t) system.push(t);
    } else if (m?.role === 'user') push('user', userBlocks(m.content));
    else if (m?.role === 'assistant') {
      const blocks: Block[] = [];
      const t = textOf(m.content);
      if (t) blocks.push({ type: 'text', text: t });
      for (const tc of Array.isArray(m.tool_calls) ? m.tool_calls : [])
        blocks.push({
          type: 'tool_use',
          id: tc.id,
          name: tc.function?.name,
          input: parseArguments(tc.function?.arguments),
        });
      push('assistant', blocks);
    } else if (m?.role === 'tool') {
      push('user', [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: textOf(m.content) }]);
    }
  }
  const out: Record<string, unknown> = { model, max_tokens: maxTokens, messages };
  if (system.length) out.system = system.join('\n\n');
  if (typeof body.temperature === 'number') out.temperature = Math.min(1, body.temperature);
  if (typeof body.top_p === 'number') out.top_p = body.top_p;
  if (body.stop !== undefined && body.stop !== null)
    out.stop_sequences = Array.isArray(body.stop) ? body.stop : [body.stop];
  if (body.stream === true) out.stream = true;
  const tools = (Array.isArray(body.tools) ? body.tools : []).filter(
    (t: any) => t?.type === 'function' && t.function?.name,
  );
  if (tools.length)
    out.tools = tools.map((t: any) => ({
      name: t.function.name,
      ...(t.function.description ? { description: t.function.description } : {}),
      input_schema: t.function.parameters ?? { type: 'object', properties: {} },
    }));
  const choice = toolChoice(body.tool_choice, body.parallel_tool_calls);
  if (choice && (tools.length || choice.type === 'none')) out.tool_choice = choice;
  const structured = structuredTool(body.response_format);
  if (structured) {
    out.tools = [...((out.tools as Block[]) ?? []), structured];
    // With tools of its own the model may still call them first; alone, the answer must be the JSON.
    out.tool_choice = tools.length ? { type: 'any' } : { type: 'tool', name: STRUCTURED_TOOL };
  }
  if (typeof body.user === 'string') out.metadata = { user_id: body.user };
  return out;
}
