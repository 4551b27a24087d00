-- layout: job. Reaches a value through `cold`: refused.
return twice(cold.LIMIT)
