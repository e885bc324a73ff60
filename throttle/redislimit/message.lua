-- message.lua: how the scripts name a key in what they publish on the
-- Client's channel (pause.lua, adaptive.lua). Fields are separated by
-- single spaces, and a key is the caller's: one drawn from an
-- Authorization header holds a space. So field writes a key's '%' as
-- %25 and ' ' as %20, and message.go reads them back.
local function field(key)
  return (string.gsub(key, '[ %%]', {['%'] = '%25', [' '] = '%20'}))
end
