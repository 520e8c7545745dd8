// An Anthropic Messages request as an OpenAI chat completions request, for Anthropic clients on an endpoint
// backed by an OpenAI-compatible provider: the system prompt as a system message, tool_use blocks as tool
// calls, tool_result blocks as tool messages (placed before the user's other content, as OpenAI expects
// answers to follow the calls), images and PDFs as image_url and file parts. What OpenAI's chat API has no
// equivalent for is refused by name rather than dropped (decision 052).
import { ApiError } from '../../errors.js';

type Part = Record<string, unknown>;
type ChatMessage = Record<string, unknown>;

function mediaUrl(source: any): string | undefined {
  if (source?.type === 'base64' && typeof source.data === 'string')
    return `data:${source.media_type ?? 'application/octet-stream'};base64,${source.data}`;
  if (source?.type === 'url' && typeof source.url === 'string') return source.url;
  return undefined;
}

function blocksOf(content: unknown): any[] {
  if (typeof content === 'string') return content ? [{ type: 'text', text: content }] : [];
  return Array.isArray(content) ? content.filter((b) => b && typeof b === 'object') : [];
}

/** The text of a tool_result's content (a string, or text blocks). */
function resultText(content: unknown): string {
  return blocksOf(content)
    .filter((b) => b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text)
    .join('\n');
}

function userParts(blocks: any[]): Part[] {
  const out: Part[] = [];
  for (const b of blocks) {
    if (b.type === 'text' && typeof b.text === 'string') out.push({ type: 'text', text: b.text });
    else if (b.type === 'image') {
      const url = mediaUrl(b.source);
      if (url) out.push({ type: 'image_url', image_url: { url } });
    } else if (b.type === 'document') {
      const url = mediaUrl(b.source);
      if (url?.startsWith('data:')) out.push({ type: 'file', file: { file_data: url } });
      else if (b.source?.type === 'text' && typeof b.source.data === 'string')
        out.push({ type: 'text', text: b.source.data });
      else
        throw new ApiError(
          'MALFORMED_REQUEST',
          'a document block by URL cannot be passed to an OpenAI-compatible provider; send it as base64',
        );
    }
  }
  return out;
}

/** A user turn: its tool results first (each a `tool` message), then what the user wrote beside them. */
function userTurn(blocks: any[], out: ChatMessage[]) {
  for (const b of blocks)
    if (b.type === 'tool_result')
      out.push({
        role: 'tool',
        tool_call_id: b.tool_use_id,
        content: b.is_error ? `Error: ${resultText(b.content)}` : resultText(b.content),
      });
  const parts = userParts(blocks.filter((b) => b.type !== 'tool_result'));
  if (!parts.length) return;
  const onlyText = parts.every((p) => p.type === 'text');
  out.push({
    role: 'user',
    content: onlyText ? parts.map((p) => p.text).join('\n') : parts,
  });
}

function assistantTurn(blocks: any[], out: ChatMessage[]) {
  const text = blocks
    .filter((b) => b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text)
    .join('');
  const calls = blocks
    .filter((b) => b.type === 'tool_use')
    .map((b) => ({
      id: b.id,
      type: 'function',
      function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) },
    }));
  // Thinking blocks are the provider's own; an OpenAI model has nothing to read in them.
  if (!text && !calls.length) return;
  out.push({ role: 'assistant', content: text || null, ...(calls.length ? { tool_calls: calls } : {}) });
}

function toolChoice(choice: any): { choice?: unknown; parallel?: boolean } {
  if (!choice || typeof choice !== 'object') return {};
  const parallel = choice.disable_parallel_tool_use === true ? false : undefined;
  if (choice.type === 'auto') return { choice: 'auto', parallel };
  if (choice.type === 'any') return { choice: 'required', parallel };
  if (choice.type === 'none') return { choice: 'none' };
  if (choice.type === 'tool' && typeof choice.name === 'string')
    return { choice: { type: 'function', function: { name: choice.name } }, parallel };
  return {};
}

export interface ChatShape {
  /** The model the provider is asked for (the endpoint's). */
  model: string | undefined;
  /** The output limit: the caller's max_tokens, or the cap Berth reserved for. */
  maxTokens: number | undefined;
  /** The field the provider honours as its output limit (Provider.chatLimitFields). */
  limitField: string;
  /** Ask for the usage chunk of a stream (the translation needs it for Anthropic's message_delta). */
  streamUsage: boolean;
}

export function messagesToChat(body: any, shape: ChatShape): Record<string, unknown> {
  if (typeof body.top_k === 'number' && body.top_k > 0)
    throw new ApiError(
      'MALFORMED_REQUEST',
      'top_k has no equivalent on this endpoint’s OpenAI-compatible provider; leave it out',
    );
  if (body.thinking?.type === 'enabled')
    throw new ApiError(
      'MALFORMED_REQUEST',
      'extended thinking (thinking.type enabled) is not available through this endpoint’s OpenAI-compatible provider; leave it out',
    );
  const messages: ChatMessage[] = [];
  const system = Array.isArray(body.system) ? resultText(body.system) : body.system;
  if (typeof system === 'string' && system) messages.push({ role: 'system', content: system });
  for (const m of Array.isArray(body.messages) ? body.messages : []) {
    const blocks = blocksOf(m?.content);
    if (m?.role === 'user') userTurn(blocks, messages);
    else if (m?.role === 'assistant') assistantTurn(blocks, messages);
  }
  const out: Record<string, unknown> = { messages };
  if (shape.model !== undefined) out.model = shape.model;
  else if (typeof body.model === 'string') out.model = body.model;
  if (shape.maxTokens !== undefined) out[shape.limitField] = shape.maxTokens;
  if (typeof body.temperature === 'number') out.temperature = body.temperature;
  if (typeof body.top_p === 'number') out.top_p = body.top_p;
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length) out.stop = body.stop_sequences;
  if (body.stream === true) {
    out.stream = true;
    if (shape.streamUsage) out.stream_options = { include_usage: true };
  }
  const tools = (Array.isArray(body.tools) ? body.tools : []).filter(
    (t: any) => typeof t?.name === 'string' && (t.type === undefined || t.type === 'custom'),
  );
  const serverTools = (Array.isArray(body.tools) ? body.tools : []).filter(
    (t: any) => t?.type !== undefined && t.type !== 'custom',
  );
  if (serverTools.length)
    throw new ApiError(
      'MALFORMED_REQUEST',
      `Anthropic's server tools (${serverTools.map((t: any) => t.type).join(', ')}) are not available through this endpoint’s OpenAI-compatible provider`,
    );
  if (tools.length)
    out.tools = tools.map((t: any) => ({
      type: 'function',
      function: {
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        parameters: t.input_schema ?? { type: 'object', properties: {} },
      },
    }));
  const { choice, parallel } = toolChoice(body.tool_choice);
  if (choice !== undefined && (tools.length || choice === 'none')) out.tool_choice = choice;
  if (parallel === false && tools.length) out.parallel_tool_calls = false;
  if (typeof body.metadata?.user_id === 'string') out.user = body.metadata.user_id;
  return out;
}
