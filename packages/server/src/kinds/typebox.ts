// TypeBox's builders, loaded from its CommonJS build: its ES-module build is some 250 files, each a module load at
// every `berth serve` start and, through the TypeScript loader's hooks, some 2 ms each in every test process.
import { createRequire } from 'node:module';
import type * as TypeBox from '@sinclair/typebox';
import type * as TypeBoxValue from '@sinclair/typebox/value';

const require = createRequire(import.meta.url);

export const { Type } = require('@sinclair/typebox') as typeof TypeBox;
export const { Value } = require('@sinclair/typebox/value') as typeof TypeBoxValue;
