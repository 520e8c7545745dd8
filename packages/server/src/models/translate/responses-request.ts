// OpenAI's Responses API on endpoints whose provider does not speak it (Anthropic), request side: a
// Responses request rewritten as a chat completions request, which is then translated to Messages like any
// chat call (responses-answer.ts turns the answer back). The AI SDK's default `openai(model)` uses this API.

type Json = Record<string, any>;

const textParts = (content: unknown): string =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? content
          .filter((p: any) => typeof p?.text === 'string')
          .map((p: any) => p.text)
          .join('\n')
      : '';

/** Input content parts as chat content parts (text and images). */
function chatParts(content: unknown): unknown {
  if (typeof content === 'string' || !Array.isArray(content)) return content ?? '';
  return content.flatMap((p: any): Json[] => {
    if (p?.type === 'input_text' || p?.type === 'output_text' || p?.type === 'text')
      return [{ type: 'text', text: p.text }];
    if (p?.type === 'input_image' && typeof p.image_url === 'string')
      return [{ type: 'image_url', image_url: { url: p.image_url } }];
    if (p?.type === 'input_file' && typeof p.file_data === 'string')
      return [{ type: 'file', file: { file_data: p.file_data, filename: p.filename } }];
    return [];
  });
}

/** A Responses request as a chat completions request. */
export function responsesToChat(body: Json): Json {
  const messages: Json[] = [];
  if (typeof body.instructions === 'string' && body.instructions)
    messages.push({ role: 'system', content: body.instructions });
  const items = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : (body.input ?? []);
  for (const it of Array.isArray(items) ? items : []) {
    if (it?.type === 'function_call') {
      const last = messages.at(-1);
      const call = {
        id: it.call_id,
        type: 'function',
        function: { name: it.name, arguments: it.arguments ?? '{}' },
      };
      if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) last.tool_calls.push(call);
      else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
    } else if (it?.type === 'function_call_output')
      messages.push({
        role: 'tool',
        tool_call_id: it.call_id,
        content: typeof it.output === 'string' ? it.output : textParts(it.output),
      });
    else if (it && typeof it.role === 'string' && (it.type === undefined || it.type === 'message'))
      messages.push({
        role: it.role,
        content: it.role === 'assistant' ? textParts(it.content) : chatParts(it.content),
      });
  }
  const chat: Json = { model: body.model, messages };
  if (typeof body.max_output_tokens === 'number') chat.max_tokens = body.max_output_tokens;
  for (const k of ['temperature', 'top_p', 'stream', 'user', 'parallel_tool_calls'])
    if (body[k] !== undefined) chat[k] = body[k];
  const tools = (Array.isArray(body.tools) ? body.tools : []).filter((t: any) => t?.type === 'function');
  if (tools.length)
    chat.tools = tools.map((t: any) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
  const tc = body.tool_choice;
  chat.tool_choice =
    tc && typeof tc === 'object' && tc.type === 'function'
      ? { type: 'function', function: { name: tc.name } }
      : tc;
  if (chat.tool_choice === undefined) delete chat.tool_choice;
  const format = body.text?.format;
  if (format?.type === 'json_schema')
    chat.response_format = {
      type: 'json_schema',
      json_schema: { name: format.name, description: format.description, schema: format.schema },
    };
  else if (format?.type === 'json_object') chat.response_format = { type: 'json_object' };
  return chat;
}
